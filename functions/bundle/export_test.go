package bundle

// Encode lets tests sign manifests this version of Publish would not write.
var Encode = encode
