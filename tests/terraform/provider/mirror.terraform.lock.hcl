# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/terraform-provider-openstack/openstack" {
  version     = "3.4.0"
  constraints = "3.4.0"
  hashes = [
    "h1:2k26campOs1PDfo56Fs4BR6BJVUq2UD1Z20SfGb2F68=",
  ]
}
