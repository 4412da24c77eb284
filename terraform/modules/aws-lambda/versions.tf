terraform {
  # 1.9: variable validations that refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.29: aws_lambda_permission.invoked_via_function_url, which a public
      # Function URL needs since October 2025.
      version = ">= 6.29"
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
