package fakecase

import "path"

// Hostile and honest file names: each scenario makes the canned change and
// also writes one file, inside the allowed directory, whose name is the
// point. The honest ones (non-ASCII, a quote, bytes that are not UTF-8) must
// pass and round-trip exactly through patch.diff and report.json; the ones
// carrying terminal escapes or a bidi override must be blocked
// (UNSAFE_FILE_NAME) and shown escaped everywhere.
func NameScenarios() []Scenario {
	named := func(name, description, base string) Scenario {
		return Scenario{name, description, func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			rel, err := Target(c.contract.AllowedPaths)
			if err != nil {
				return err
			}
			return c.write(path.Join(path.Dir(rel), base), "a file whose name is the test\n")
		}}
	}
	return []Scenario{
		named("name-unicode", "also write an allowed file named café.md", "café.md"),
		named("name-quote", `also write an allowed file named say "hi".md`, `say "hi".md`),
		named("name-non-utf8", "also write an allowed file whose name holds the Latin-1 byte 0xE9, which is not UTF-8", "caf\xe9-latin1.md"),
		named("name-ansi", "also write an allowed file whose name erases the terminal line and prints a green PASS",
			"x\x1b[2K\r\x1b[32mrun: PASS\x1b[0m.md"),
		named("name-bidi", "also write an allowed file whose name holds U+202E, so that it reads as notes-txt.md", "notes-\u202edm.txt"),
	}
}
