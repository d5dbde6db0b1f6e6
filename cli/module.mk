# cli/: the ktune binary's subcommands
CLI_SRCS += cli/main.c cli/cli.c cli/cmd_info.c cli/cmd_sweep.c cli/cmd_run.c
TESTS += test_cli
