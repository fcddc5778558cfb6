package natsexec

import "bytes"

// PackForTest is pack into memory.
func PackForTest(runDir string) ([]byte, error) {
	var b bytes.Buffer
	err := pack(&b, runDir)
	return b.Bytes(), err
}
