# db/: the SQLite store (a leaf module)
LIB_SRCS += db/store.c db/merge.c
# `ktune merge` lives with the store it drives.
CLI_SRCS += cli/cmd_merge.c
TESTS += test_store

$(BUILD)/obj/db/store.o: $(BUILD)/schema_sql.h
$(BUILD)/schema_sql.h: db/schema.sql $(BUILD)/embed
	@echo "  EMBED   $<"
	$(Q)$(BUILD)/embed -s $@ kt_schema_sql $<
