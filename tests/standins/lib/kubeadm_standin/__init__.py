"""Stand-ins for kubeadm and kubectl used by the kos tests.

Kubernetes cannot run on the test machines, so `bin/kubeadm` and `bin/kubectl` imitate
what the real tools print, which exit codes they return and which files they leave
behind (as https://github.com/kubernetes/kubernetes/tree/v1.31.0/cmd/kubeadm/app and
https://github.com/kubernetes/kubectl write them).  A small HTTPS daemon
(`apiserver.py`) stands in for the cluster so that joins can happen from other hosts.

Only the standard library and the `openssl` command are used: the executables also run
under Debian's system python3 inside containers, where `cryptography` is not installed.
"""
