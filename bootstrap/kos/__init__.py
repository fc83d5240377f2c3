"""kos: Kubernetes on OpenStack, converged by Salt."""
