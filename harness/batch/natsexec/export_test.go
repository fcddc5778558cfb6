package natsexec

import "bytes"

// PackForTest is pack into memory.
func PackForTest(runDir string) ([]byte, error) {
	var b bytes.Buffer
	err := pack(&b, runDir)
	return b.Bytes(), err
}

// The roles' inbox prefixes, for a test's own connections.
const CoordinatorInbox = coordinatorInbox

var WorkerInbox = workerInbox
