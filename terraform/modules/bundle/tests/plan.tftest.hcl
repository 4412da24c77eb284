# make tf-check: the files and sizes the module computes for the example
# bundle (no provider).

variables {
  policies_dir = "../../../policies/examples"
}

run "examples" {
  command = plan

  assert {
    condition     = length(output.files) > 0 && alltrue([for f in output.files : !endswith(f, "_test.yaml")])
    error_message = "policy files, and no test files"
  }
  assert {
    condition     = alltrue([for f in output.files : output.objects[f].size == length(file("${var.policies_dir}/${f}"))])
    error_message = "sizes are the files' byte counts (the examples are ASCII)"
  }
}
