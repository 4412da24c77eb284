# The files of a policy bundle and what its manifest says of each, as
# `admitfn push` computes them: the key is the path under the directory, the
# size and SHA-256 are of the exact bytes. No provider: the platform modules
# upload the files and write the manifest last.

locals {
  files = sort([
    for f in fileset(var.policies_dir, "**") : f
    if can(regex("\\.(ya?ml|json)$", f)) && !can(regex("_test\\.ya?ml$", f)) && !can(regex("(^|/)\\.", f))
  ])

  # Terraform has no file size function: the size comes from the base64
  # length, less its padding.
  base64 = { for f in local.files : f => filebase64("${var.policies_dir}/${f}") }

  objects = {
    for f in local.files : f => {
      path   = "${var.policies_dir}/${f}"
      sha256 = filesha256("${var.policies_dir}/${f}")
      size   = length(local.base64[f]) / 4 * 3 - (endswith(local.base64[f], "==") ? 2 : endswith(local.base64[f], "=") ? 1 : 0)
      type   = endswith(f, ".json") ? "application/json" : "application/yaml"
    }
  }
}
