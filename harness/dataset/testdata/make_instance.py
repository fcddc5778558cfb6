# Builds a small Python repository with a bug (calc.add subtracts), commits
# it as the base, commits the fix and its test on top, and writes one
# SWE-bench instance for it: the base commit, the fix as the reference
# patch, the new test as the test patch, FAIL_TO_PASS and PASS_TO_PASS.
# Usage: python3 make_instance.py REPO_DIR INSTANCES_FILE [wrong]
import json, os, subprocess, sys

repo, out = sys.argv[1], sys.argv[2]
env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")

def git(*args):
    return subprocess.run(["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True, env=env).stdout

def write(rel, text):
    p = os.path.join(repo, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)

os.makedirs(repo, exist_ok=True)
git("init", "-q", "-b", "main")
write("calc.py", "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n")
write("tests/__init__.py", "")
write("tests/test_calc.py", "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n")
git("add", "-A")
git("commit", "-q", "-m", "base")
base = git("rev-parse", "HEAD").strip()
write("calc.py", "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n")
git("commit", "-q", "-am", "fix add")
fix = git("diff", base, "HEAD")
write("tests/test_calc.py", "from calc import add, neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
git("commit", "-q", "-am", "test add")
tests = git("diff", "HEAD~1", "HEAD")
git("reset", "-q", "--hard", base)  # the clone is at the base; the fix is only in its object store
inst = {"instance_id": "demo__pyrepo-1", "repo": "demo/pyrepo", "base_commit": base,
        "problem_statement": "calc.add(2, 3) returns -1; it must return the sum.",
        "patch": fix, "test_patch": tests,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_neg"])}
bad = dict(inst, instance_id="demo__pyrepo-2", test_patch="diff --git a/nope.py b/nope.py\ndeleted file mode 100644\n--- a/nope.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
with open(out, "w") as f:
    f.write(json.dumps(inst) + "\n" + json.dumps(bad) + "\n")
