# server/: HTTP service, best-config lookup, export (and their subcommands)
LIB_SRCS += server/lookup.c
CLI_SRCS += cli/cmd_best.c
TESTS +=
