# The Terraform version is the root module's (terraform/versions.tf) to require; a module
# still names its provider's source, which is not in the hashicorp namespace
# (https://developer.hashicorp.com/terraform/language/modules/develop/providers#provider-version-constraints-in-modules).
terraform {
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = ">= 3.0.0"
    }
  }
}
