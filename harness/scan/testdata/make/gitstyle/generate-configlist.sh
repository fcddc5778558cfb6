#!/bin/sh
# Writes the list of configuration variables.
echo 'static const char *config_name_list[] = { 0 };'
