from specplan.cli import main

main()
