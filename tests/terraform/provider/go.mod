// Builds the pinned terraform-provider-openstack for the test suite's filesystem mirror.
// `go install pkg@version` cannot be used: it looks up the module's version list for
// deprecation notices, which the module proxy reachable here refuses. Requiring the
// provider from this wrapper selects exactly its own build list, and go.sum pins every
// checksum, so the binary (and the h1: hash in terraform/.terraform.lock.hcl) is
// reproducible. Keep the version in step with tests/terraform/conftest.py.
module kos.invalid/terraform-provider-build

go 1.24.0

require github.com/terraform-provider-openstack/terraform-provider-openstack/v3 v3.4.0
