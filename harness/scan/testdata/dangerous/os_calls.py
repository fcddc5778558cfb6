#!/usr/bin/env python3
# expect: 16 py-os-system high
# expect: 17 py-os-system high
# expect: 19 py-subprocess-shell high
# expect: 20 py-subprocess-shell high
# expect: 24 py-rmtree-absolute high
# expect: 26 py-rmtree-absolute high
# expect: 28 py-os-system high
"""A docstring mentioning os.system("rm -rf /") is not a call."""
import os
import shutil
import subprocess as sp
from subprocess import check_output
from os import system as run_shell

os.system("echo hi")
run_shell("ls")
sp.run(["ls", "-l"])
sp.run("ls -l", shell=True)
check_output(
    "git status",
    cwd=".", shell=True)
subprocess = None
shutil.rmtree("/var/lib/data")
shutil.rmtree("build")
shutil.rmtree('~/cache', ignore_errors=True)
x = "shutil.rmtree('/')"
os.popen('id').read()
