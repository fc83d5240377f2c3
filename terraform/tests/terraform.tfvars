# Values every test file in this directory starts from (`terraform test` loads the automatic
# variable files of the test directory for the tests in it, Terraform 1.7 and later:
# https://developer.hashicorp.com/terraform/language/tests#specify-variables-with-the-command-line-or-definition-files).
# A file's own variables block, or a run's, sets what it varies.
external_network_name = "ext-net"
base_image            = "ubuntu-24.04"
ssh_public_keys       = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKosDeployKeyForTestsOnly kos@ci"]
ssh_allowed_cidrs     = ["198.51.100.0/24"]
