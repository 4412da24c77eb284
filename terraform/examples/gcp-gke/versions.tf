terraform {
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.11"
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.30"
    }
    # The modules' own: declared here so that tests' mocks reach them.
    random = {
      source  = "hashicorp/random"
      version = ">= 3.9"
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.14"
    }
  }
}
