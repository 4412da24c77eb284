variable "policies_dir" {
  description = "Directory of the policy bundle: the same files `admitfn push` uploads (.yaml, .yml and .json; not *_test.yaml, not hidden)."
  type        = string

  validation {
    condition     = length([for f in fileset(var.policies_dir, "**") : f if can(regex("\\.(ya?ml|json)$", f)) && !can(regex("_test\\.ya?ml$", f)) && !can(regex("(^|/)\\.", f))]) > 0
    error_message = "The policies directory holds no policy files (.yaml, .yml or .json, not *_test.yaml, not hidden)."
  }
}
