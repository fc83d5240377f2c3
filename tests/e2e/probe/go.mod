module kos.invalid/probe

go 1.22
