# server/: HTTP service, best-config lookup, export, import (and their subcommands)
LIB_SRCS += server/lookup.c server/explain.c server/query.c server/launch.c server/export.c server/import.c \
	server/jobs.c server/http.c server/routes.c
CLI_SRCS += cli/cmd_best.c cli/cmd_serve.c cli/cmd_export.c cli/cmd_import.c
TESTS += test_server test_export test_dashboard

# The OpenAPI document and the dashboard page are embedded in the binary.
$(BUILD)/obj/server/routes.o: $(BUILD)/openapi_json.h $(BUILD)/index_html.h
$(BUILD)/openapi_json.h: server/openapi.json $(BUILD)/embed
	@echo "  EMBED   $<"
	$(Q)$(BUILD)/embed -s $@ openapi_json $<
$(BUILD)/index_html.h: server/static/index.html $(BUILD)/embed
	@echo "  EMBED   $<"
	$(Q)$(BUILD)/embed -s $@ index_html $<
# The service under a second writer, odd input and load (bench/reliability.sh).
TESTS += test_reliab
