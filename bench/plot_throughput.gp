# Draws hilo_bench's throughput series (--out_data) as a PNG:
#   gnuplot -e "data='throughput.tsv'; out='throughput.png'" plot_throughput.gp
# Optional: -e "subtitle='...'" for a second title line; -e "peers='peers.tsv'"
# adds bench/peers_bench.sh's Redis series.
if (!exists("data")) data = 'throughput.tsv'
if (!exists("out")) out = 'throughput.png'
if (!exists("subtitle")) subtitle = ''
if (!exists("peers")) peers = ''

set terminal pngcairo size 960,600 font "sans,11" noenhanced
set output out
set datafile separator "\t"
set title "hilo: requests per second against requests in flight".(subtitle eq '' ? '' : "\n".subtitle)
set xlabel "requests in flight (closed loops over loopback)"
set ylabel "requests per second"
set logscale x 2
set xrange [0.8:320]
set xtics ("1" 1, "16" 16, "64" 64, "256" 256)
set yrange [0:*]
set grid ytics xtics
set key outside bottom center horizontal maxrows 3 spacing 1.2 width 2
set style line 1 lw 2.5 pt 7 ps 1.2 lc rgb "#1f77b4"
set style line 2 lw 2.5 pt 5 ps 1.2 lc rgb "#2ca02c"
set style line 3 lw 1.5 pt 9 ps 1.0 lc rgb "#9467bd" dt 3
set style line 4 lw 2.5 pt 13 ps 1.2 lc rgb "#7f7f7f"
set style line 5 lw 2 lc rgb "#d62728" dt 2
set style line 6 lw 2 pt 11 ps 1.1 lc rgb "#ff7f0e"
set style line 7 lw 1.5 pt 10 ps 1.0 lc rgb "#ff7f0e" dt 3
plot data using 1:2 with linespoints ls 1 title columnheader(2), \
     ''   using 1:3 with linespoints ls 2 title columnheader(3), \
     ''   using 1:4 with linespoints ls 3 title columnheader(4), \
     ''   using 1:5 with linespoints ls 4 title columnheader(5), \
     ''   using 1:6 with lines ls 5 title columnheader(6), \
     for [c=2:(peers eq '' ? 1 : 3)] peers using 1:c with linespoints ls (c + 4) title columnheader(c)
