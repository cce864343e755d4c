# make coverage: line and branch coverage of lib/ and agent/ by the unit
# tests, from a build of its own (build/coverage, --coverage), reported by
# gcovr per file as a table and as HTML (tests/coverage/run).
DEB_PACKAGES += gcovr

.PHONY: coverage
coverage:
	+@$(MAKE) --no-print-directory deps
	+@MAKE="$(MAKE)" tests/coverage/run
