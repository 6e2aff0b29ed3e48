module selftest

go 1.26
