package batch

// PassAtKForTest exposes passAtK and passHatK.
func PassAtKForTest(planned, n, c int) (at, hat []PassAtK) {
	return passAtK(planned, n, c), passHatK(planned, n, c)
}
