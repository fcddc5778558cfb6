# Quiet prefixes, as in git's shared.mak: `make V=1` shows the commands,
# `make -s` shows nothing.
QUIET_SUBDIR0  = +$(MAKE) -C # space to separate -C and subdir
QUIET_SUBDIR1  =

ifneq ($(findstring w,$(firstword -$(MAKEFLAGS))),w)
PRINT_DIR = --no-print-directory
else # "make -w"
NO_SUBDIR = :
endif

ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),s)
ifndef V
	QUIET_SUBDIR0  = +@subdir=
	QUIET_SUBDIR1  = ;$(NO_SUBDIR) echo '   ' SUBDIR $$subdir; \
			 $(MAKE) $(PRINT_DIR) -C $$subdir
	QUIET_CC       = @echo '   ' CC $@;
	QUIET_LINK     = @echo '   ' LINK $@;
	QUIET_AR       = @echo '   ' AR $@;
	QUIET_GEN      = @echo '   ' GEN $@;
	QUIET_MKDIR_P_PARENT  = @echo '   ' MKDIR -p $(@D);
	export V
endif
endif
