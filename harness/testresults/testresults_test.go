package testresults_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/testresults"
)

type R = testresults.Result

const (
	pass  = testresults.Pass
	fail  = testresults.Fail
	erred = testresults.Error
	skip  = testresults.Skip
	xfail = testresults.XFail
)

// goStream is `go test -json ./broken ./ok ./timeout` with
// GODEBUG=gotestjsonbuildtext=1: the build error comes as plain text.
const goStream = `# example.com/m/broken [example.com/m/broken.test]
broken/b.go:3:23: cannot use "x" (untyped string constant) as int value in return statement
{"Time":"2026-12-01T22:34:31.656884Z","Action":"start","Package":"example.com/m/broken"}
{"Time":"2026-12-01T22:34:31.658785Z","Action":"output","Package":"example.com/m/broken","Output":"FAIL\texample.com/m/broken [build failed]\n"}
{"Time":"2026-12-01T22:34:31.658792Z","Action":"fail","Package":"example.com/m/broken","Elapsed":0}
{"Time":"2026-12-01T22:34:31.659008Z","Action":"start","Package":"example.com/m/ok"}
{"Time":"2026-12-01T22:34:31.659787Z","Action":"run","Package":"example.com/m/ok","Test":"TestPass"}
{"Time":"2026-12-01T22:34:31.659801Z","Action":"output","Package":"example.com/m/ok","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Time":"2026-12-01T22:34:31.659876Z","Action":"output","Package":"example.com/m/ok","Test":"TestPass","Output":"    ok_test.go:5: hello\n"}
{"Time":"2026-12-01T22:34:31.659881Z","Action":"output","Package":"example.com/m/ok","Test":"TestPass","Output":"--- PASS: TestPass (0.01s)\n"}
{"Time":"2026-12-01T22:34:31.659885Z","Action":"pass","Package":"example.com/m/ok","Test":"TestPass","Elapsed":0.0126}
{"Time":"2026-12-01T22:34:31.659888Z","Action":"run","Package":"example.com/m/ok","Test":"TestSkip"}
{"Time":"2026-12-01T22:34:31.659890Z","Action":"output","Package":"example.com/m/ok","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Time":"2026-12-01T22:34:31.659892Z","Action":"output","Package":"example.com/m/ok","Test":"TestSkip","Output":"    ok_test.go:6: not today\n"}
{"Time":"2026-12-01T22:34:31.659894Z","Action":"output","Package":"example.com/m/ok","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Time":"2026-12-01T22:34:31.659899Z","Action":"skip","Package":"example.com/m/ok","Test":"TestSkip","Elapsed":0}
{"Time":"2026-12-01T22:34:31.659901Z","Action":"run","Package":"example.com/m/ok","Test":"TestSub"}
{"Time":"2026-12-01T22:34:31.659905Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub","Output":"=== RUN   TestSub\n"}
{"Time":"2026-12-01T22:34:31.659906Z","Action":"run","Package":"example.com/m/ok","Test":"TestSub/case_1"}
{"Time":"2026-12-01T22:34:31.659907Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub/case_1","Output":"=== RUN   TestSub/case_1\n"}
{"Time":"2026-12-01T22:34:31.659910Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub/case_1","Output":"--- PASS: TestSub/case_1 (0.00s)\n"}
{"Time":"2026-12-01T22:34:31.659911Z","Action":"pass","Package":"example.com/m/ok","Test":"TestSub/case_1","Elapsed":0.0004}
{"Time":"2026-12-01T22:34:31.659912Z","Action":"run","Package":"example.com/m/ok","Test":"TestSub/case_2"}
{"Time":"2026-12-01T22:34:31.659914Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub/case_2","Output":"=== RUN   TestSub/case_2\n"}
{"Time":"2026-12-01T22:34:31.659915Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub/case_2","Output":"    ok_test.go:9: got 1, want 2\n"}
{"Time":"2026-12-01T22:34:31.659950Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub/case_2","Output":"--- FAIL: TestSub/case_2 (0.02s)\n"}
{"Time":"2026-12-01T22:34:31.659952Z","Action":"fail","Package":"example.com/m/ok","Test":"TestSub/case_2","Elapsed":0.0156}
{"Time":"2026-12-01T22:34:31.659953Z","Action":"output","Package":"example.com/m/ok","Test":"TestSub","Output":"--- FAIL: TestSub (0.02s)\n"}
{"Time":"2026-12-01T22:34:31.659957Z","Action":"fail","Package":"example.com/m/ok","Test":"TestSub","Elapsed":0.0161}
{"Time":"2026-12-01T22:34:31.659958Z","Action":"output","Package":"example.com/m/ok","Output":"FAIL\n"}
{"Time":"2026-12-01T22:34:31.659990Z","Action":"output","Package":"example.com/m/ok","Output":"FAIL\texample.com/m/ok\t0.003s\n"}
{"Time":"2026-12-01T22:34:31.659997Z","Action":"fail","Package":"example.com/m/ok","Elapsed":0.003}
{"Time":"2026-12-01T22:34:31.895201Z","Action":"start","Package":"example.com/m/timeout"}
{"Time":"2026-12-01T22:34:31.897309Z","Action":"run","Package":"example.com/m/timeout","Test":"TestSlow"}
{"Time":"2026-12-01T22:34:31.897326Z","Action":"output","Package":"example.com/m/timeout","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Time":"2026-12-01T22:34:32.900051Z","Action":"output","Package":"example.com/m/timeout","Test":"TestSlow","Output":"panic: test timed out after 1s\n"}
{"Time":"2026-12-01T22:34:32.900100Z","Action":"output","Package":"example.com/m/timeout","Test":"TestSlow","Output":"\trunning tests:\n"}
{"Time":"2026-12-01T22:34:32.900337Z","Action":"output","Package":"example.com/m/timeout","Output":"FAIL\texample.com/m/timeout\t1.005s\n"}
{"Time":"2026-12-01T22:34:32.900346Z","Action":"fail","Package":"example.com/m/timeout","Elapsed":1.005}
`

// goStream124 is Go 1.24+ output: build errors as build-output events, a
// panicking test, a TestMain that exits 3 after its tests passed, a
// benchmark (which gets "run" and never a verdict) and -count=2.
const goStream124 = `{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-output","Output":"# example.com/m/broken [example.com/m/broken.test]\n"}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-output","Output":"broken/b.go:3:23: cannot use \"x\" (untyped string constant) as int value in return statement\n"}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/broken"}
{"Action":"output","Package":"example.com/m/broken","Output":"FAIL\texample.com/m/broken [build failed]\n"}
{"Action":"fail","Package":"example.com/m/broken","Elapsed":0,"FailedBuild":"example.com/m/broken [example.com/m/broken.test]"}
{"Action":"run","Package":"example.com/m/panics","Test":"TestA"}
{"Action":"output","Package":"example.com/m/panics","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"example.com/m/panics","Test":"TestA","Elapsed":0.001}
{"Action":"run","Package":"example.com/m/panics","Test":"TestPanic"}
{"Action":"output","Package":"example.com/m/panics","Test":"TestPanic","Output":"=== RUN   TestPanic\n"}
{"Action":"output","Package":"example.com/m/panics","Test":"TestPanic","Output":"--- FAIL: TestPanic (0.00s)\n"}
{"Action":"output","Package":"example.com/m/panics","Test":"TestPanic","Output":"panic: boom [recovered, repanicked]\n"}
{"Action":"fail","Package":"example.com/m/panics","Test":"TestPanic","Elapsed":0}
{"Action":"output","Package":"example.com/m/panics","Output":"FAIL\texample.com/m/panics\t0.004s\n"}
{"Action":"fail","Package":"example.com/m/panics","Elapsed":0.004}
{"Action":"run","Package":"example.com/m/mainfail","Test":"TestOK"}
{"Action":"pass","Package":"example.com/m/mainfail","Test":"TestOK","Elapsed":0}
{"Action":"output","Package":"example.com/m/mainfail","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/mainfail","Output":"FAIL\texample.com/m/mainfail\t0.002s\n"}
{"Action":"fail","Package":"example.com/m/mainfail","Elapsed":0.003}
{"Action":"run","Package":"example.com/m/bench","Test":"BenchmarkX"}
{"Action":"output","Package":"example.com/m/bench","Test":"BenchmarkX","Output":"BenchmarkX-2     \t      10\t        59.40 ns/op\n"}
{"Action":"output","Package":"example.com/m/bench","Output":"PASS\n"}
{"Action":"pass","Package":"example.com/m/bench","Elapsed":0.018}
{"Action":"run","Package":"example.com/m/flaky","Test":"TestFlaky"}
{"Action":"output","Package":"example.com/m/flaky","Test":"TestFlaky","Output":"--- PASS: TestFlaky (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/flaky","Test":"TestFlaky","Elapsed":0.005}
{"Action":"run","Package":"example.com/m/flaky","Test":"TestFlaky"}
{"Action":"output","Package":"example.com/m/flaky","Test":"TestFlaky","Output":"--- FAIL: TestFlaky (0.01s)\n"}
{"Action":"fail","Package":"example.com/m/flaky","Test":"TestFlaky","Elapsed":0.007}
{"Action":"fail","Package":"example.com/m/flaky","Elapsed":0.02}
`

const pytestXML = `<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="3" tests="6" time="0.051" timestamp="2026-12-01T22:00:00.000000+00:00" hostname="ci"><testcase classname="tests.test_math" name="test_add" time="0.001" /><testcase classname="tests.test_math" name="test_div" time="0.0026"><failure message="assert 2 == 3">def test_div():
&gt;       assert 1 + 1 == 3
E       assert 2 == 3

tests/test_math.py:8: AssertionError</failure><system-out>computing 1 + 1
</system-out></testcase><testcase classname="tests.test_math" name="test_xfail" time="0.001"><skipped type="pytest.xfail" message="known bug #12" /></testcase><testcase classname="tests.test_math" name="test_skip" time="0.000"><skipped type="pytest.skip" message="no GPU">tests/test_math.py:20: no GPU</skipped></testcase><testcase classname="tests.test_math" name="test_xfail_msg" time=""><skipped message="XFAIL flaky upstream" /></testcase><testcase classname="tests.test_db" name="test_connect" time="0.010"><error message="failed on setup with &quot;ConnectionRefusedError&quot;">conftest.py:5: in db
    raise ConnectionRefusedError</error><system-err>db log line</system-err></testcase></testsuite></testsuites>
`

const jestXML = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="3" failures="1" errors="0" time="1.204">
  <testsuite name="math utils" errors="0" failures="1" skipped="1" timestamp="2026-12-01T22:00:00" time="0.512" tests="3">
    <testcase classname="math utils adds numbers" name="math utils adds numbers" time="0.003">
    </testcase>
    <testcase classname="math utils divides by zero" name="math utils divides by zero" time="0.007">
      <failure>Error: expect(received).toThrow()

Received function did not throw
    at Object.&lt;anonymous&gt; (src/math.test.js:12:31)</failure>
    </testcase>
    <testcase classname="math utils rounds" name="math utils rounds" time="0">
      <skipped/>
    </testcase>
  </testsuite>
  <testsuite name="strings" tests="1" time="0.2">
    <testcase classname="strings trims" name="strings trims" time="0.2"/>
  </testsuite>
</testsuites>
`

// surefireXML is a Maven surefire report: a single <testsuite> root.
const surefireXML = `<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report.xsd" version="3.0" name="com.example.CalcTest" time="1,234.6" tests="3" errors="0" skipped="0" failures="1">
  <properties>
    <property name="java.version" value="17"/>
  </properties>
  <testcase name="adds" classname="com.example.CalcTest" time="0.002"/>
  <testcase name="divides" classname="com.example.CalcTest" time="0.012">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <2> but was: <3>
	at com.example.CalcTest.divides(CalcTest.java:14)]]></failure>
    <system-out><![CDATA[dividing]]></system-out>
  </testcase>
  <testcase name="slow" classname="com.example.CalcTest" time="1,234.567"/>
</testsuite>
`

// nestedXML nests suites (PHPUnit style) and has no classname attributes.
const nestedXML = `<testsuite name="root">
  <testsuite name="parser">
    <testcase name="parses empty" time="0.5"/>
    <testsuite>
      <testcase name="deep unnamed" time="1"/>
    </testsuite>
  </testsuite>
  <testsuites>
    <testsuite name="lexer"><testcase name="splits" time="2.25"/></testsuite>
  </testsuites>
  <testcase name="top level" time="bogus"/>
</testsuite>
`

const tap13 = `TAP version 13
1..9
ok 1 - parser handles empty input
not ok 2 - parser rejects garbage
  ---
  message: 'expected error, got nil'
  severity: fail
  duration_ms: 12.6
  ...
ok 3 - network fetch # SKIP no network in sandbox
not ok 4 - unicode names # TODO not implemented yet
ok 5 - cache warms # todo flaky timing
# a comment line, ignored
ok 6 - retries
not ok 7 retries
ok 8
not ok 9 - escapes \# and issue #42 # skip not a skip when not ok
`

// tap14 has a subtest (indented by 4) summed up by its parent's line.
const tap14 = `TAP version 14
# Subtest: group
    ok 1 - inner one
    not ok 2 - inner two
      ---
      at: inner.js:3
      ...
    1..2
not ok 1 - group
  ---
  duration_ms: 3.2
  ...
ok - implicitly numbered
ok 3 -
`

// parseCase is one report and the results it must give.
type parseCase struct {
	name   string
	format testresults.Format
	input  string
	want   []R
}

// goCases are go test -json streams.
var goCases = []parseCase{
	{"go test -json", testresults.GoTestJSON, goStream, []R{
		{ID: "example.com/m/broken", Outcome: erred, Output: "FAIL\texample.com/m/broken [build failed]\n"},
		{ID: "example.com/m/ok.TestPass", Outcome: pass, DurationMs: 13, Output: "=== RUN   TestPass\n    ok_test.go:5: hello\n--- PASS: TestPass (0.01s)\n"},
		{ID: "example.com/m/ok.TestSkip", Outcome: skip, Output: "=== RUN   TestSkip\n    ok_test.go:6: not today\n--- SKIP: TestSkip (0.00s)\n"},
		{ID: "example.com/m/ok.TestSub", Outcome: fail, DurationMs: 16, Output: "=== RUN   TestSub\n--- FAIL: TestSub (0.02s)\n"},
		{ID: "example.com/m/ok.TestSub/case_1", Outcome: pass, DurationMs: 0, Output: "=== RUN   TestSub/case_1\n--- PASS: TestSub/case_1 (0.00s)\n"},
		{ID: "example.com/m/ok.TestSub/case_2", Outcome: fail, DurationMs: 16, Output: "=== RUN   TestSub/case_2\n    ok_test.go:9: got 1, want 2\n--- FAIL: TestSub/case_2 (0.02s)\n"},
		{ID: "example.com/m/timeout.TestSlow", Outcome: erred, Output: "=== RUN   TestSlow\npanic: test timed out after 1s\n\trunning tests:\n"},
	}},
	{"go test -json, Go 1.24 build events, panic, TestMain exit, benchmark, -count=2", testresults.GoTestJSON, goStream124, []R{
		{ID: "example.com/m/bench.BenchmarkX", Outcome: pass, Output: "BenchmarkX-2     \t      10\t        59.40 ns/op\n"},
		{ID: "example.com/m/broken", Outcome: erred, Output: "# example.com/m/broken [example.com/m/broken.test]\nbroken/b.go:3:23: cannot use \"x\" (untyped string constant) as int value in return statement\nFAIL\texample.com/m/broken [build failed]\n"},
		{ID: "example.com/m/flaky.TestFlaky", Outcome: fail, DurationMs: 12, Output: "--- PASS: TestFlaky (0.00s)\n--- FAIL: TestFlaky (0.01s)\n"},
		{ID: "example.com/m/mainfail", Outcome: erred, Output: "PASS\nFAIL\texample.com/m/mainfail\t0.002s\n"},
		{ID: "example.com/m/mainfail.TestOK", Outcome: pass},
		{ID: "example.com/m/panics.TestA", Outcome: pass, DurationMs: 1, Output: "=== RUN   TestA\n"},
		{ID: "example.com/m/panics.TestPanic", Outcome: erred, Output: "=== RUN   TestPanic\n--- FAIL: TestPanic (0.00s)\npanic: boom [recovered, repanicked]\n"},
	}},
	{"go test -json, output after a verdict, a restart before one", testresults.GoTestJSON, `{"Action":"run","Package":"example.com/m","Test":"TestLate"}
{"Action":"pass","Package":"example.com/m","Test":"TestLate","Elapsed":0.002}
{"Action":"output","Package":"example.com/m","Test":"TestLate","Output":"late log line\n"}
{"Action":"run","Package":"example.com/m","Test":"TestRestart"}
{"Action":"output","Package":"example.com/m","Test":"TestRestart","Output":"first start\n"}
{"Action":"run","Package":"example.com/m","Test":"TestRestart"}
{"Action":"pass","Package":"example.com/m","Test":"TestRestart","Elapsed":0.001}
{"Action":"pass","Package":"example.com/m","Elapsed":0.01}
`, []R{
		{ID: "example.com/m.TestLate", Outcome: pass, DurationMs: 2, Output: "late log line\n"},
		{ID: "example.com/m.TestRestart", Outcome: erred, DurationMs: 1, Output: "first start\n"},
	}},
	{"go tool test2json on a binary: no Package", testresults.GoTestJSON, `{"Action":"run","Test":"TestX"}
{"Action":"output","Test":"TestX","Output":"--- PASS: TestX (0.00s)\n"}
{"Action":"pass","Test":"TestX","Elapsed":0}
{"Action":"output","Output":"panic: in TestMain after the tests\n"}
{"Action":"fail","Elapsed":0.004}
`, []R{
		{ID: "(unnamed package)", Outcome: erred, Output: "panic: in TestMain after the tests\n"},
		{ID: "TestX", Outcome: pass, Output: "--- PASS: TestX (0.00s)\n"},
	}},
}

// junitCases are JUnit XML documents.
var junitCases = []parseCase{
	{"pytest junitxml", testresults.JUnit, pytestXML, []R{
		{ID: "tests.test_db.test_connect", Outcome: erred, DurationMs: 10, Output: "failed on setup with \"ConnectionRefusedError\"\nconftest.py:5: in db\n    raise ConnectionRefusedError\ndb log line"},
		{ID: "tests.test_math.test_add", Outcome: pass, DurationMs: 1},
		{ID: "tests.test_math.test_div", Outcome: fail, DurationMs: 3, Output: "assert 2 == 3\ndef test_div():\n>       assert 1 + 1 == 3\nE       assert 2 == 3\n\ntests/test_math.py:8: AssertionError\ncomputing 1 + 1"},
		{ID: "tests.test_math.test_skip", Outcome: skip, Output: "no GPU\ntests/test_math.py:20: no GPU"},
		{ID: "tests.test_math.test_xfail", Outcome: xfail, DurationMs: 1, Output: "known bug #12"},
		{ID: "tests.test_math.test_xfail_msg", Outcome: xfail, Output: "XFAIL flaky upstream"},
	}},
	{"jest-junit", testresults.JUnit, jestXML, []R{
		{ID: "math utils adds numbers.math utils adds numbers", Outcome: pass, DurationMs: 3},
		{ID: "math utils divides by zero.math utils divides by zero", Outcome: fail, DurationMs: 7, Output: "Error: expect(received).toThrow()\n\nReceived function did not throw\n    at Object.<anonymous> (src/math.test.js:12:31)"},
		{ID: "math utils rounds.math utils rounds", Outcome: skip},
		{ID: "strings trims.strings trims", Outcome: pass, DurationMs: 200},
	}},
	{"surefire testsuite root", testresults.JUnit, surefireXML, []R{
		{ID: "com.example.CalcTest.adds", Outcome: pass, DurationMs: 2},
		{ID: "com.example.CalcTest.divides", Outcome: fail, DurationMs: 12, Output: "expected: <2> but was: <3>\norg.opentest4j.AssertionFailedError: expected: <2> but was: <3>\n\tat com.example.CalcTest.divides(CalcTest.java:14)\ndividing"},
		{ID: "com.example.CalcTest.slow", Outcome: pass, DurationMs: 1234567},
	}},
	{"nested suites without classname", testresults.JUnit, nestedXML, []R{
		{ID: "deep unnamed", Outcome: pass, DurationMs: 1000},
		{ID: "lexer.splits", Outcome: pass, DurationMs: 2250},
		{ID: "parser.parses empty", Outcome: pass, DurationMs: 500},
		{ID: "root.top level", Outcome: pass},
	}},
	{"junit duplicate testcase", testresults.JUnit, `<testsuite name="s">
<testcase classname="a" name="t" time="0.1"/>
<testcase classname="a" name="t" time="0.2"><failure message="boom"/></testcase>
<testcase classname="a" name="u" time="0.3"><skipped/></testcase>
<testcase classname="a" name="u" time="0.4"><skipped message="xfail: known"/></testcase>
</testsuite>`, []R{
		{ID: "a.t", Outcome: fail, DurationMs: 300, Output: "boom"},
		{ID: "a.u", Outcome: xfail, DurationMs: 700, Output: "xfail: known"},
	}},
}

// tapCases are TAP streams.
var tapCases = []parseCase{
	{"tap 13", testresults.TAP, tap13, []R{
		{ID: "cache warms", Outcome: pass, Output: "# todo flaky timing"},
		{ID: "escapes # and issue #42", Outcome: fail, Output: "# skip not a skip when not ok"},
		{ID: "network fetch", Outcome: skip, Output: "# SKIP no network in sandbox"},
		{ID: "parser handles empty input", Outcome: pass},
		{ID: "parser rejects garbage", Outcome: fail, DurationMs: 13, Output: "message: 'expected error, got nil'\nseverity: fail\nduration_ms: 12.6"},
		{ID: "retries #6", Outcome: pass},
		{ID: "retries #7", Outcome: fail},
		{ID: "test 8", Outcome: pass},
		{ID: "unicode names", Outcome: xfail, Output: "# TODO not implemented yet"},
	}},
	{"tap 14 subtests", testresults.TAP, tap14, []R{
		{ID: "group", Outcome: fail, DurationMs: 3, Output: "duration_ms: 3.2"},
		{ID: "implicitly numbered", Outcome: pass},
		{ID: "test 3", Outcome: pass},
	}},
	{"tap plan with missing tests", testresults.TAP, "1..4\nok 1 - a\nok 3 - c\n", []R{
		{ID: "a", Outcome: pass},
		{ID: "c", Outcome: pass},
		{ID: "test 2 (missing)", Outcome: erred, Output: "planned by 1..4 but not reported"},
		{ID: "test 4 (missing)", Outcome: erred, Output: "planned by 1..4 but not reported"},
	}},
	{"tap bail out", testresults.TAP, "TAP version 13\n1..3\nok 1 - connects\nBail out! database went away\nok 2 - after the bail-out, not read\n", []R{
		{ID: "connects", Outcome: pass},
		{ID: "test 2 (missing)", Outcome: erred, Output: "Bail out! database went away"},
		{ID: "test 3 (missing)", Outcome: erred, Output: "Bail out! database went away"},
	}},
	{"tap bail out before the plan", testresults.TAP, "ok 1 - first\nBail out! cannot continue\n", []R{
		{ID: "Bail out!", Outcome: erred, Output: "Bail out! cannot continue"},
		{ID: "first", Outcome: pass},
	}},
	{"tap unterminated yaml block", testresults.TAP, "1..2\nnot ok 1 - first\n  ---\n  message: cut short\nok 2 - second\n    ok 1 - a subtest line, not YAML\n", []R{
		{ID: "first", Outcome: fail, Output: "message: cut short"},
		{ID: "second", Outcome: pass},
	}},
	{"tap duplicate after disambiguation", testresults.TAP, "ok 1 - same\nnot ok 1 - same\n", []R{
		{ID: "same #1", Outcome: fail},
	}},
}

func TestParse(t *testing.T) {
	for _, cases := range [][]parseCase{goCases, junitCases, tapCases} {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := testresults.Parse(c.format, []byte(c.input))
				if err != nil {
					t.Fatal(err)
				}
				same(t, got, c.want)
			})
		}
	}
}

func same(t *testing.T, got, want []R) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w any = "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("result %d:\n got %+q\nwant %+q", i, g, w)
		}
	}
}

// TestWorstOutcome runs one JUnit testcase twice with every pair of
// outcomes: error > fail > pass > xfail > skip.
func TestWorstOutcome(t *testing.T) {
	order := []struct {
		o    testresults.Outcome
		elem string
	}{
		{skip, `<skipped message="later"/>`},
		{xfail, `<skipped type="pytest.xfail" message="bug"/>`},
		{pass, ``},
		{fail, `<failure message="no"/>`},
		{erred, `<error message="crash"/>`},
	}
	for i, a := range order {
		for j, b := range order {
			doc := `<testsuite name="s"><testcase classname="c" name="t" time="0.001">` + a.elem +
				`</testcase><testcase classname="c" name="t" time="0.002">` + b.elem + `</testcase></testsuite>`
			got, err := testresults.Parse(testresults.JUnit, []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			want := order[max(i, j)].o
			if len(got) != 1 || got[0].ID != "c.t" || got[0].Outcome != want || got[0].DurationMs != 3 {
				t.Errorf("%s then %s: got %+v, want one c.t %s of 3ms", a.o, b.o, got, want)
			}
		}
	}
}

// TestEmpty: no tests ran is a valid report, an empty (not nil) list.
func TestEmpty(t *testing.T) {
	for _, c := range []struct {
		format testresults.Format
		input  string
	}{
		{testresults.JUnit, `<?xml version="1.0"?><testsuites name="empty"></testsuites>`},
		{testresults.JUnit, `<testsuite name="s" tests="0"><properties/></testsuite>`},
		{testresults.TAP, "TAP version 13\n1..0 # SKIP no tests on this platform\n"},
		{testresults.GoTestJSON, `{"Action":"start","Package":"example.com/m/none"}` + "\n" + `{"Action":"output","Package":"example.com/m/none","Output":"?   \texample.com/m/none\t[no test files]\n"}` + "\n" + `{"Action":"skip","Package":"example.com/m/none","Elapsed":0}`},
	} {
		got, err := testresults.Parse(c.format, []byte(c.input))
		if err != nil {
			t.Fatalf("%s %q: %v", c.format, c.input, err)
		}
		js, _ := json.Marshal(got)
		if string(js) != "[]" {
			t.Errorf("%s %q: got %s, want []", c.format, c.input, js)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name   string
		format testresults.Format
		input  string
		want   string
	}{
		{"go: plain text only", testresults.GoTestJSON, "# example.com/m\n./m.go:1:1: expected 'package'\nFAIL\texample.com/m [setup failed]\n{not json}\n", "not a `go test -json` stream"},
		{"go: empty", testresults.GoTestJSON, "", "not a `go test -json` stream"},
		{"tap: free text", testresults.TAP, "All 3 tests passed!\nokay then\n", "not TAP"},
		{"junit: truncated", testresults.JUnit, `<testsuites><testsuite name="s"><testcase name="a">`, "invalid JUnit XML"},
		{"junit: not xml", testresults.JUnit, "PASSED 3 tests", "invalid JUnit XML"},
		{"junit: two roots", testresults.JUnit, `<testsuite/><testsuite/>`, "more than one root element"},
		{"junit: wrong root", testresults.JUnit, `<html><body/></html>`, "root element is <html>"},
		{"junit: external entity", testresults.JUnit, `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&xxe;"/></testsuite>`, "invalid JUnit XML"},
		{"junit: internal entity", testresults.JUnit, `<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><testsuite><testcase name="x"><failure>&b;</failure></testcase></testsuite>`, "invalid JUnit XML"},
		{"tap: plan over MaxTests", testresults.TAP, "1..100001\n", "100000"},
		{"unknown format", testresults.Format("nunit"), "<x/>", `unknown format "nunit" (known: go-test-json, junit, tap, reward)`},
		{"reward: words", testresults.Reward, "passed\n", "one number"},
		{"reward: two numbers", testresults.Reward, "1 0\n", "one number"},
		{"reward: empty", testresults.Reward, "", "one number"},
		{"reward: nan", testresults.Reward, "NaN", "one number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := testresults.Parse(c.format, []byte(c.input))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error containing %q", got, err, c.want)
			}
			if got != nil {
				t.Errorf("got results %v alongside the error", got)
			}
		})
	}
}

func TestMaxTests(t *testing.T) {
	tap := func(n int) []byte {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "ok %d\n", i)
		}
		return []byte(b.String())
	}
	got, err := testresults.Parse(testresults.TAP, tap(testresults.MaxTests))
	if err != nil || len(got) != testresults.MaxTests {
		t.Fatalf("%d tests: got %d results, %v; want %d, nil", testresults.MaxTests, len(got), err, testresults.MaxTests)
	}
	if got[0].ID != "test 1" || got[len(got)-1].ID != "test 99999" {
		t.Errorf("first and last IDs %q, %q", got[0].ID, got[len(got)-1].ID)
	}
	got, err = testresults.Parse(testresults.TAP, tap(testresults.MaxTests+1))
	if err == nil || !strings.Contains(err.Error(), "100001 tests") || !strings.Contains(err.Error(), "cap of 100000 (MaxTests)") {
		t.Fatalf("%d tests: got %d results, %v; want an error naming the cap", testresults.MaxTests+1, len(got), err)
	}
}

// goOutputs is a go test -json stream in which example.com/m.TestBig runs
// once per output, printing it.
func goOutputs(outputs ...string) []byte {
	var b strings.Builder
	for _, o := range outputs {
		for _, e := range []map[string]any{
			{"Action": "run", "Package": "example.com/m", "Test": "TestBig"},
			{"Action": "output", "Package": "example.com/m", "Test": "TestBig", "Output": o},
			{"Action": "pass", "Package": "example.com/m", "Test": "TestBig", "Elapsed": 0.001},
		} {
			js, _ := json.Marshal(e)
			b.Write(js)
			b.WriteByte('\n')
		}
	}
	return []byte(b.String())
}

func TestMaxOutput(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name    string
		outputs []string
		want    string
	}{
		{"at the cap", []string{a(testresults.MaxOutput)}, a(testresults.MaxOutput)},
		{"over the cap", []string{a(5000)}, a(4096) + "\n[… 904 bytes cut]"},
		{"a rune across the cap", []string{a(4095) + "é" + a(10)}, a(4095) + "\n[… 12 bytes cut]"},
		{"a rune ending at the cap", []string{a(4094) + "é" + a(10)}, a(4094) + "é" + "\n[… 10 bytes cut]"},
		{"merged duplicates", []string{a(3000) + "\n", a(3000) + "\n", a(3000) + "\n"}, a(3000) + "\n" + a(1095) + "\n[… 4907 bytes cut]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := testresults.Parse(testresults.GoTestJSON, goOutputs(c.outputs...))
			if err != nil {
				t.Fatal(err)
			}
			want := []R{{ID: "example.com/m.TestBig", Outcome: pass, DurationMs: int64(len(c.outputs)), Output: c.want}}
			same(t, got, want)
			if n := len(strings.Split(got[0].Output, "\n[…")[0]); n > testresults.MaxOutput {
				t.Errorf("kept %d bytes, more than MaxOutput", n)
			}
		})
	}
}

func TestFormats(t *testing.T) {
	want := []testresults.Format{"go-test-json", "junit", "tap", "reward"}
	if got := testresults.Formats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Formats() = %v, want %v", got, want)
	}
}

// A reward file is one test: passed at 1 or more, failed below.
func TestReward(t *testing.T) {
	for in, want := range map[string]testresults.Outcome{"1\n": testresults.Pass, "1.0": testresults.Pass, " 2 ": testresults.Pass,
		"0\n": testresults.Fail, "0.99": testresults.Fail, "-1": testresults.Fail} {
		got, err := testresults.Parse(testresults.Reward, []byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(got) != 1 || got[0].ID != testresults.RewardID || got[0].Outcome != want {
			t.Errorf("%q: got %+v, want one test %q %s", in, got, testresults.RewardID, want)
		}
	}
}
