package bundle

// Encode lets tests sign manifests this version of Publish would not write.
var Encode = encode

// BeforeCommit holds a publish just before it writes its manifest.
func BeforeCommit(o *PublishOptions, f func()) { o.beforeCommit = f }
