#!/bin/bash
# expect: 6 recursive-delete critical
# expect: 8 recursive-delete critical
# The working directory moves out of the fixture before a relative delete.
cd ..
rm -rf ./*
cd
rm -rf .cache
