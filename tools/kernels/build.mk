# The kernel matrix (docs/kernels.md): Debian 12's 6.1, 6.12 from
# bookworm-backports and the newest Debian kernel, fetched with a private apt
# configuration; the newest one's tools run in a debootstrap chroot.
DEB_PACKAGES += debootstrap
