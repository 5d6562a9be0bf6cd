"""Pinning and sources: what each side is (pin files, wheels, source trees and their import
closures), fetched and verified by hash. Nothing here runs a kernel."""
