# Reads a file for the examples' tests, whose mocks cannot call functions.

variable "file" {
  type = string
}

output "json" {
  value = file(var.file)
}
