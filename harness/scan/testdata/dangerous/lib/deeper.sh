#!/bin/sh
rm -rf /var/lib
sh dangerous/lib/helper.sh
