#!/usr/bin/env bash
# generate-deploy.sh keeps one install path: it copies the CRDs that
# controller-gen writes to deploy/crds/ into the chart's crds/, and renders
# the plain manifests deploy/{namespace,rbac,ingressclass,controller,proxy,
# pdb}.yaml from the chart with deploy/helm/deploy-values.yaml. Part of
# `make generate`; test/chart checks that the committed files match.
#
#   scripts/generate-deploy.sh            # writes deploy/ and the chart's crds/
#   SLUICE_DEPLOY_OUT=DIR scripts/generate-deploy.sh   # writes DIR/*.yaml and DIR/crds/ only
set -euo pipefail
cd "$(dirname "$0")/.."
helm=$(scripts/helm.sh)
chart=deploy/helm/sluice
out=${SLUICE_DEPLOY_OUT:-deploy}
crds=$chart/crds
if [[ -n "${SLUICE_DEPLOY_OUT:-}" ]]; then
	crds=$out/crds
fi
mkdir -p "$out" "$crds"
rm -f "$crds"/*.yaml
cp deploy/crds/*.yaml "$crds/"

# A fixed Kubernetes version for the rendering (Capabilities), so the output
# does not depend on the helm build.
render() {
	"$helm" template sluice "$chart" --namespace sluice-system --kube-version 1.36.0 \
		-f deploy/helm/deploy-values.yaml "${@/#/--show-only=templates/}"
}
write() {
	local file=$1
	shift
	{
		echo "# Generated from the Helm chart deploy/helm/sluice by scripts/generate-deploy.sh"
		echo "# (make generate) with deploy/helm/deploy-values.yaml: edit the chart, not this file."
		render "$@" | sed '1{/^---$/d}'
	} >"$out/$file"
}
write namespace.yaml namespace.yaml
write rbac.yaml serviceaccounts.yaml rbac-controller.yaml rbac-proxy.yaml
write ingressclass.yaml ingressclass.yaml
write controller.yaml controller.yaml
write proxy.yaml proxy.yaml
write pdb.yaml pdb.yaml
