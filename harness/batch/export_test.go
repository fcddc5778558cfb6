package batch

// PassAtKForTest exposes passAtK.
func PassAtKForTest(n, c int) []PassAtK { return passAtK(n, c) }
