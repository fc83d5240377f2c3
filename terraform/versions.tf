terraform {
  # 1.9: validation blocks that refer to other variables.
  required_version = ">= 1.9.0"

  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "3.4.0"
    }
  }
}

# No credentials here: the provider reads clouds.yaml / OS_CLOUD or the OS_* environment
# (a token or an application credential), so no password ever becomes a variable or state.
provider "openstack" {}
