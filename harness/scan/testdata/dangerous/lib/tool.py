import subprocess
# subprocess.run("x", shell=True) in a comment is nothing
subprocess.run("make", shell=True)
