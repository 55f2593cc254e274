#!/usr/bin/env bash
# Makes the Debian root filesystem every built image starts from (the kind node, kube-proxy,
# agnhost, the nftpolicy build stage), with debootstrap from Debian's mirror, once: the tarball
# is cached under $NFTPOLICY_CACHE keyed by the suite and the package list.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out="$(rootfs_tar)"
if [ -s "$out" ]; then echo "rootfs: cached at $out"; exit 0; fi
command -v debootstrap >/dev/null || apt_install debootstrap
dir="$out.d"
rm -rf "$dir"; mkdir -p "$dir"
t0=$(date +%s)
echo "rootfs: debootstrap $DEBIAN_SUITE ($ROOTFS_PACKAGES)"
debootstrap --variant=minbase --include="${ROOTFS_PACKAGES// /,}" "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" \
  > "$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
# As kind's base image: no services but those the node enables, journald without kmsg, systemd as init.
chroot "$dir" sh -c '
  find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
        /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
        /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo ReadKMsg=no >> /etc/systemd/journald.conf
  ln -sf /usr/lib/systemd/systemd /sbin/init
  apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log
'
: > "$dir/etc/machine-id"
tar -C "$dir" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"; rm -rf "$dir"
echo "rootfs: $(du -h "$out" | cut -f1) in $(( $(date +%s) - t0 )) s at $out"
