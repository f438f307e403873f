module gmsa-admission/test/gojson

go 1.22
