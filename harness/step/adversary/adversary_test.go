package adversary

import (
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/testresults"
)

func TestScreen(t *testing.T) {
	for _, tc := range []struct {
		path, data string
		excluded   bool
	}{
		{"t/test_a.py", "@mock.patch('subprocess.run')\ndef test_a(run): ...\n", true},
		{"t/test_b.py", "def test_b(monkeypatch):\n    monkeypatch.setattr(requests, 'get', fake)\n", true},
		{"t/test_c.py", "import subprocess\nsubprocess.run = lambda *a: None\n", true},
		{"t/test_d.py", "import subprocess\ndef test_d():\n    assert subprocess.run(['true']).returncode == 0\n", false},
		{"t/a.test.js", "jest.mock('child_process')\n", true},
		{"t/b.test.js", "const cp = require('child_process')\n", false},
		{"x_test.go", "var execCommand = exec.Command\nfunc init() { execCommand = func(string, ...string) *exec.Cmd { return nil } }\n", true},
		{"README.md", "mock.patch('subprocess.run')", false}, // only test sources are read
	} {
		if got := Screen(tc.path, []byte(tc.data)) != ""; got != tc.excluded {
			t.Errorf("%s: excluded %v, want %v", tc.path, got, tc.excluded)
		}
	}
}

func TestClassify(t *testing.T) {
	base := []testresults.Result{{ID: "counts", Outcome: testresults.Fail}, {ID: "tells nothing", Outcome: testresults.Pass},
		{ID: "skipped", Outcome: testresults.Skip}, {ID: "does not load", Outcome: testresults.Error}, {ID: "vanishes", Outcome: testresults.Fail}}
	res := []testresults.Result{{ID: "counts", Outcome: testresults.Pass}, {ID: "tells nothing", Outcome: testresults.Fail}}
	tests, disc, failed := Classify(base, res)
	if disc != 2 || failed != 1 {
		t.Fatalf("discriminating %d failed %d, want 2 and 1: %+v", disc, failed, tests)
	}
	want := map[string]string{"counts": ctoharness.AdversaryDiscriminating, "tells nothing": ctoharness.AdversaryNotDiscriminating,
		"skipped": ctoharness.AdversaryNotDiscriminating, "does not load": ctoharness.AdversaryFailedImport, "vanishes": ctoharness.AdversaryDiscriminating}
	for _, x := range tests {
		if x.Class != want[x.ID] {
			t.Errorf("%s: class %s, want %s", x.ID, x.Class, want[x.ID])
		}
		if x.ID == "vanishes" && (x.OK || x.Result != "missing") {
			t.Errorf("a counted test missing on the result: %+v", x)
		}
		if x.ID == "tells nothing" && !x.OK {
			t.Errorf("a test that does not count failed the run: %+v", x)
		}
	}
}
