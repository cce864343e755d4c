# The kernel matrix (docs/kernels.md): Debian 12's 6.1, 6.12 from
# bookworm-backports and the newest Debian kernel, fetched with a private apt
# configuration; the newest one's tools run in a debootstrap chroot.
DEB_PACKAGES += debootstrap zstd

# Every VM suite on every kernel of the matrix; ends with "N passed, N
# failed" per kernel and in all. CHECK_KERNELS="6.12" narrows it.
.PHONY: check-kernels
check-kernels:
	+@$(MAKE) --no-print-directory deps
	+@$(MAKE) --no-print-directory -k userspace
	+@MAKE="$(MAKE)" VM_PROGRAMS="$(PROGRAMS) $(VM_TESTS)" VM_SUITES="$(VM_SUITES)" \
		tools/kernels/check
