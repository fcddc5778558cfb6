#!/usr/bin/env python3
"""Helpers: os.system("x") and shutil.rmtree("/") appear only in this text."""
import shutil
import subprocess

# os.system("rm -rf /") in a comment
subprocess.run(["go", "test", "./..."], check=True)
subprocess.run("echo safe".split(), shell=False)
shutil.rmtree("build", ignore_errors=True)
msg = 'subprocess.run("x", shell=True)'
print(msg)
