terraform {
  # 1.9: variable validations that refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.11"
    }
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
