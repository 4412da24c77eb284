// Reads a JSON array of wgpolicyk8s.io/v1alpha2 PolicyReports and
// ClusterPolicyReports on stdin and validates each against the CRD's
// schema (validators generated from it by kubernetes-models). Prints one
// line per report, "ok KIND NAMESPACE/NAME" or "invalid KIND ...: why",
// and exits 1 when any is invalid.
import { PolicyReport } from "@kubernetes-models/kyverno/wgpolicyk8s.io/v1alpha2/PolicyReport";
import { ClusterPolicyReport } from "@kubernetes-models/kyverno/wgpolicyk8s.io/v1alpha2/ClusterPolicyReport";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const kinds = { PolicyReport, ClusterPolicyReport };
let failed = false;
for (const doc of JSON.parse(input)) {
  const name = `${doc.kind} ${doc.metadata?.namespace ?? ""}/${doc.metadata?.name}`;
  const Kind = kinds[doc.kind];
  if (!Kind || doc.apiVersion !== "wgpolicyk8s.io/v1alpha2") {
    console.log(`invalid ${name}: not a wgpolicyk8s.io/v1alpha2 report`);
    failed = true;
    continue;
  }
  try {
    new Kind(doc).validate();
    console.log(`ok ${name}`);
  } catch (e) {
    console.log(`invalid ${name}: ${e.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
