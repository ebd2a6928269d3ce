module github.com/hookline/hookline

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	google.golang.org/protobuf v1.36.12
)
