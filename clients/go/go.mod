module leased.dev/leaseclient

go 1.19
