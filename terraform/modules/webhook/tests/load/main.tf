# Reads the rendered configurations for the tests: OpenTofu calls no
# functions in a test file's variables, and Terraform reads no run outputs
# in the file-level ones, so each run takes them from this module's.

variable "file" {
  type = string
}

output "configurations" {
  value = jsondecode(file(var.file))
}
