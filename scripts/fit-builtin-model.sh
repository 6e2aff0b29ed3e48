#!/bin/sh
# Re-make miotool's embedded TunaNet model (internal/aiheur/builtin/models):
# measure find results over the collector's sweep of problems on a device,
# then fit the model to them. The CSV goes to internal/aiheur/builtin/testdata,
# where the package's tests re-fit it and require the committed bytes.
#
#   scripts/fit-builtin-model.sh                    # the simulator
#   scripts/fit-builtin-model.sh --backend cuda     # a GPU (here, with Go)
#   scripts/fit-builtin-model.sh --data h200.csv    # fit data collected elsewhere
#
# On a GPU machine without Go, build the collector first and bring the CSV back:
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o bin/tunanet-collect ./tools/tunanet-collect
#   ./bin/tunanet-collect --backend cuda --out h200-find.csv      # on the GPU machine
#   scripts/fit-builtin-model.sh --data h200-find.csv             # here
#
# Any other flags go to the collector (see go run ./tools/tunanet-collect -h).
set -eu
cd "$(dirname "$0")/.."

testdata=internal/aiheur/builtin/testdata
models=internal/aiheur/builtin/models
backend=sim
data=
while [ $# -gt 0 ]; do
	case "$1" in
	--backend) backend=$2; shift 2 ;;
	--backend=*) backend=${1#--backend=}; shift ;;
	--data) data=$2; shift 2 ;;
	--data=*) data=${1#--data=}; shift ;;
	*) break ;;
	esac
done

if [ -z "$data" ]; then
	data=$testdata/$backend-find.csv
	go run ./tools/tunanet-collect --backend "$backend" --out "$data" "$@"
elif [ "$(dirname "$data")" != "$testdata" ]; then
	cp "$data" "$testdata/"
	data=$testdata/$(basename "$data")
fi
go run ./tools/tunanet-fit --data "$data" --out "$models"
go test ./internal/aiheur/builtin/
echo "fitted $models from $data; commit both, and remove the data of any model it replaces"
