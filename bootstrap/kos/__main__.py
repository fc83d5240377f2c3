from kos.cli import main

main()
